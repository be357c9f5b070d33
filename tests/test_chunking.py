from pathrag_pipeline.ingest.chunking import chunk_text
from pathrag_pipeline.text.tokenizer import count_tokens, token_spans, truncate_to_tokens

TEXT = " ".join(f"Sentence {i} mentions Valmere University and the river Lune." for i in range(400))


def test_token_spans_cover_text_without_gaps():
    text = "Dr. Ada Halden's survey (1887) of Port Aster — 12,345 tons!\n\nNext paragraph."
    spans = list(token_spans(text))
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    assert count_tokens(text) == len(spans)


def test_long_words_split_like_bpe():
    assert count_tokens("a") == 1
    assert count_tokens(" pneumonoultramicroscopic") > 1


def test_truncate_to_tokens_is_a_prefix_with_that_many_tokens():
    cut = truncate_to_tokens(TEXT, 50)
    assert TEXT.startswith(cut)
    assert count_tokens(cut) == 50
    assert truncate_to_tokens("short text", 100) == "short text"


def test_windows_respect_size_overlap_and_offsets():
    chunks = chunk_text("doc.md", TEXT, max_tokens=200, overlap=20)
    assert len(chunks) > 5
    for c in chunks:
        assert TEXT[c.char_start:c.char_end] == c.text
        assert c.token_count <= 200
    # consecutive windows overlap in text
    for a, b in zip(chunks, chunks[1:]):
        assert b.char_start < a.char_end
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))


def test_ids_are_stable_for_unchanged_text_and_change_with_it():
    a = chunk_text("doc.md", TEXT, max_tokens=200, overlap=20)
    edited = TEXT + " One more sentence about Carrick at the end."
    b = chunk_text("doc.md", edited, max_tokens=200, overlap=20)
    assert [c.id for c in a[:-1]] == [c.id for c in b[:len(a) - 1]]
    assert a[-1].id != b[-1].id or len(b) > len(a)
    other_doc = chunk_text("other.md", TEXT, max_tokens=200, overlap=20)
    assert {c.id for c in other_doc}.isdisjoint(c.id for c in a)


def test_repeated_identical_windows_get_distinct_ids():
    text = ("word " * 50).strip()
    text = "\n\n".join([text] * 4)
    chunks = chunk_text("d", text, max_tokens=50, overlap=0)
    assert len({c.id for c in chunks}) == len(chunks)


def test_bad_window_settings_rejected():
    import pytest

    with pytest.raises(ValueError):
        chunk_text("d", TEXT, max_tokens=100, overlap=100)


def test_empty_text_has_no_chunks():
    assert chunk_text("d", "   \n ") == []


def test_streamed_windows_equal_the_list_based_definition():
    """chunk_text streams token spans through one window; its windows must be exactly
    spans[k*step : k*step + max_tokens] (trimmed), as computed from the whole span list."""
    import random

    from pathrag_pipeline.ingest.chunking import chunk_text
    from pathrag_pipeline.text.tokenizer import token_spans

    def reference(text, max_tokens, overlap):
        spans, step, out, start = list(token_spans(text)), max_tokens - overlap, [], 0
        while start < len(spans):
            window = spans[start:start + max_tokens]
            piece = text[window[0][0]:window[-1][1]]
            if piece.strip():
                lead = len(piece) - len(piece.lstrip())
                out.append((window[0][0] + lead, window[0][0] + lead + len(piece.strip()), len(window)))
            if start + max_tokens >= len(spans):
                break
            start += step
        return out

    rng = random.Random(1)
    for _ in range(300):
        text = " ".join(rng.choice(["a", "bb", "  ", "x.", "\n", "ccc"]) for _ in range(rng.randint(0, 60)))
        max_tokens = rng.randint(1, 12)
        overlap = rng.randint(0, max_tokens - 1)
        got = [(c.char_start, c.char_end, c.token_count)
               for c in chunk_text("d", text, max_tokens=max_tokens, overlap=overlap)]
        assert got == reference(text, max_tokens, overlap), (text, max_tokens, overlap)


def test_truncate_to_tokens_equals_cutting_after_the_nth_token_span():
    """Its shortcut for texts that fit (length or count within the cap) gives what walking the spans gives."""
    import random

    rng = random.Random(7)
    pieces = ["a", "word", " Aldermere", "Universitätsbibliothek", "12345", "!!", "  ", "\n", "don't", "é", "x" * 25]
    for _ in range(500):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 30)))
        spans = list(token_spans(text))
        for cap in (1, 2, 5, len(spans) - 1, len(spans), len(spans) + 1):
            if cap <= 0:
                continue
            expected = text[:spans[cap - 1][1]] if cap <= len(spans) else text
            assert truncate_to_tokens(text, cap) == expected, (text, cap)


def test_count_tokens_equals_the_spans_on_random_text():
    """``count_tokens`` looks only at long letter runs in Python; it must count what ``token_spans`` yields, with
    long words after spaces, tabs, newlines, punctuation, digits and contractions, and letters that are not
    isalpha (a superscript two is a word character but not a letter)."""
    import random

    rng = random.Random(7)
    pieces = [" ", "  ", "\n", "\t", ".", "'s", "'ll", "’", "—", "12", "1234", "x", "Word", "internationalization",
              "abcdefghijk", "abcdefghijkl", "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "é" * 13, "ab²cdefghijklm",
              "日本語の文章です", "snake_case_words", "a" * 11, "b" * 21]
    for _ in range(2000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        assert count_tokens(text) == len(list(token_spans(text))), repr(text)
