"""Alignment: from byte automata and a vocabulary to token-level tables (`format.table`).

`flat` aligns one byte DFA (the vocabulary trie, its walk, token classes and shared rows);
`calls` aligns machines linked by calls, reusing that walk and adding the stack tokens and
suffixes a pushdown automaton needs; `row_masks` computes the token masks of a table's rows
for a grammar compiled in the process.
"""
