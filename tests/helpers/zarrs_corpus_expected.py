"""The zarrs corpus arrays that cannot mount yet, by the codec the mount's log names as the
reason: none (every data type, codec and chunk grid of the corpus is read);
`test_zarrs_corpus.test_exactly_the_listed_arrays_fail` keeps it exact."""

NOT_YET: dict[str, tuple[str, ...]] = {}
