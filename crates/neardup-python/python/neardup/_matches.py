"""What ``DocumentStore.check`` answers: a list, so that code comparing it with a list or
iterating it goes on working, that also says whether it may be incomplete."""

from __future__ import annotations

__all__ = ["Matches"]


class Matches(list):
    """The stored near-duplicates of a text as ``(id, similarity)``, most similar first.

    ``partial`` is True when a band key of the text is shared by more stored documents
    than a check reads of one key (64): near-duplicates beyond them may be missing, as the
    service's ``"partial": true`` says."""

    partial: bool = False
