"""The Python rewrite engine: masks what LibCST cannot parse, lets each rule rewrite the
statements it matches, fixes up imports and helpers, then guards the result (it compiles,
every name is still bound) before it may be written."""
