"""What makes `check` a CI gate a team can turn green and keep green without turning rules
off: acknowledgement markers in files other than Python (`lines`), `--add-noqa` (`add_noqa`)
and a baseline of accepted findings (`baseline`)."""
