"""How the peer adapters that take passages (mem0, hipporag) cut a lab document: one function, read by each adapter from its own
environment (stdlib only). Part of those peers' fingerprints (`PeerSystem.model_files`)."""
from __future__ import annotations

import re


def passages(text: str, limit: int) -> list[str]:
    """Paragraphs packed into passages of at most `limit` characters, joined by a blank line; a longer paragraph is cut at sentence
    ends (its sentences packed, joined by a space), a longer sentence at `limit` characters."""
    pieces = []  # (text, the glue that joins it to the piece before)
    for para in re.split(r"\n\s*\n", text.strip()):
        para = para.strip()
        if not para: continue
        if len(para) <= limit: pieces.append((para, "\n\n")); continue
        glue = "\n\n"
        for sent in re.split(r"(?<=[.!?])\s+", para):
            while len(sent) > limit: pieces.append((sent[:limit], glue)); sent, glue = sent[limit:], " "
            if sent.strip(): pieces.append((sent.strip(), glue)); glue = " "
    out, cur = [], ""
    for piece, glue in pieces:
        if cur and len(cur) + len(glue) + len(piece) <= limit: cur = cur + glue + piece
        else:
            if cur: out.append(cur)
            cur = piece
    if cur: out.append(cur)
    return out
