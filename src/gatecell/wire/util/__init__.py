"""Plain utilities the rest of gatecell shares, knowing nothing of HTTP or of any API: the one
redaction of secrets (`secret`), private files and folders (`private`), text shown on a
terminal (`_terminal`) and in Markdown (`_text`). They import nothing of gatecell."""
