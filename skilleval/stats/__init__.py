"""Statistics: task-aligned paired bootstrap and Gate A regressions."""
