"""Text primitives every stage shares: the offline tokenizer (token counts and windows) and entity-name keys.

May import: nothing of the project.
"""
