"""Skill banks: markdown or JSON chunks, their hashes and the system prompt they make."""
