"""kbbot: answers questions from per-domain knowledge bases, with numbered citations."""
