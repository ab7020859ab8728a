"""Report: one report model rendered as text, JSON, Markdown and HTML."""
