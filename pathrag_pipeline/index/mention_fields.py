"""The parts of a mention (description sentences, keywords) by field, and where each field's parts are stored
(shared by the mention tables, the merge and the part rankings kept from them).

An entity mention's description sentences are rows of ``mention_texts`` (joined by chunk id and ord). A relation
mention carries its keyword parts and description sentences in its own row of ``relation_mentions``, as lists of
(fold, text) in order (``keyword_parts``, ``description_parts``): a merge of a few relations then reads their
parts with their mentions instead of joining the millions of rows of ``mention_texts`` (issue 23: ~0.4 s of a
one-file edit at 100 MB, and relation parts were 61% of that table's rows).
"""

ENTITY_DESCRIPTION = "entity_description"
RELATION_DESCRIPTION = "relation_description"
RELATION_KEYWORDS = "relation_keywords"

PARTS_COLUMN = {RELATION_KEYWORDS: "keyword_parts", RELATION_DESCRIPTION: "description_parts"}
"""The ``relation_mentions`` column holding each relation field's parts."""


def parts_of(field: str, mentions: str, folds: str | None = None) -> str:
    """SQL of (key, chunk_id, ord, pos, fold, text) rows: the ``field`` parts of the mention rows of ``mentions``
    (a table name or a parenthesised query with key, chunk_id and ord columns, and for a relation field the
    field's ``PARTS_COLUMN``), ``pos`` the part's 0-based position in its field. ``folds``: SQL of a one-column
    query; only the parts whose fold it returns."""
    if field == ENTITY_DESCRIPTION:
        only = f" AND t.fold IN ({folds})" if folds else ""
        return f"""SELECT m.key, m.chunk_id, m.ord, t.pos, t.fold, t.text FROM {mentions} m
                   JOIN mention_texts t ON t.chunk_id = m.chunk_id AND t.ord = m.ord AND t.field = '{field}'{only}"""
    column = PARTS_COLUMN[field]
    only = f" WHERE p.part.fold IN ({folds})" if folds else ""
    return f"""SELECT p.key, p.chunk_id, p.ord, p.pos, p.part.fold AS fold, p.part.text AS text
               FROM (SELECT key, chunk_id, ord, unnest({column}) AS part,
                            unnest(range(len({column})))::INTEGER AS pos FROM {mentions}) p{only}"""
