# A trainable for direct_kill_test.go: it reports iterations 1..4 with a
# checkpoint each holding the iteration; the checkpoint of iteration 2 also
# holds $BIG_FILES files of 1 MiB, so that its copy into storage lasts long
# enough for the test to kill the process in the middle of it. A resumed
# attempt goes on after its checkpoint's iteration. It leaves its pid in
# $MARK_DIR/pid-<trial>-<attempt> for the test to kill.
set -eu
echo $$ > "$MARK_DIR/.pid-$TUNEJET_TRIAL_ID-$TUNEJET_ATTEMPT"
mv "$MARK_DIR/.pid-$TUNEJET_TRIAL_ID-$TUNEJET_ATTEMPT" "$MARK_DIR/pid-$TUNEJET_TRIAL_ID-$TUNEJET_ATTEMPT"
i=0
if [ -n "${TUNEJET_CHECKPOINT_DIR:-}" ]; then i=$(cat "$TUNEJET_CHECKPOINT_DIR/iteration"); fi
while [ "$i" -lt 4 ]; do
	i=$((i + 1))
	dir=$(mktemp -d)
	echo "$i" > "$dir/iteration"
	if [ "$i" -eq 2 ]; then
		head -c 1048576 /dev/urandom > "$dir/shard"
		n=0
		while [ "$n" -lt "$BIG_FILES" ]; do cp "$dir/shard" "$dir/shard-$n"; n=$((n + 1)); done
	fi
	out=$("$TUNEJET_BIN" report --checkpoint "$dir" iter_seen="$i" attempt="$TUNEJET_ATTEMPT")
	rm -rf "$dir"
	if [ "$out" = stop ]; then exit 0; fi
done
