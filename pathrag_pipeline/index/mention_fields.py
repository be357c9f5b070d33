"""The fields of ``mention_texts``: which part of a mention a text row is (shared by the mention tables and the
part rankings kept from them)."""

ENTITY_DESCRIPTION = "entity_description"
RELATION_DESCRIPTION = "relation_description"
RELATION_KEYWORDS = "relation_keywords"
