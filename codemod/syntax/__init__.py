"""Small LibCST utilities shared by the engine and the rules: quoting a node in a message,
reading dotted names and string literals, walking a tree without recursion, reading a call's
arguments and building new ones. They know nothing of the engine or of any rule, so both
layers may build on them."""
