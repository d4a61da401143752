"""The paper: LaTeX tables from Jinja2 templates (package data), figures and the PDF."""
