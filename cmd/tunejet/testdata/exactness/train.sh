# A deterministic trainable for exactness_test.go: its results are a pure
# function of its config and the iteration. At iteration i it reports
# loss = (x - 1)^2 + (1 + |x|) / i and size = (x + 1)^2 + 1 / i (a second
# metric, whose minimum is elsewhere) with a checkpoint holding i, up to $ITERS
# iterations; a resumed attempt goes on after its checkpoint's iteration.
# It leaves its pid (its process group) in $MARK_DIR/pid-<trial>-<attempt>
# for the test to kill, and appends "<trial> <iteration>" to
# $MARK_DIR/reports once each report has been accepted, so that the test
# can strike after the k-th. With $SLOW set, the trials of odd index sleep
# that long before each report, so that trials finish out of order.
set -eu
echo $$ > "$MARK_DIR/.pid-$TUNEJET_TRIAL_ID-$TUNEJET_ATTEMPT"
mv "$MARK_DIR/.pid-$TUNEJET_TRIAL_ID-$TUNEJET_ATTEMPT" "$MARK_DIR/pid-$TUNEJET_TRIAL_ID-$TUNEJET_ATTEMPT"  # whole, never seen empty
x=$(printf '%s' "$TUNEJET_CONFIG" | sed -n 's/.*"x":\([-+0-9.eE]*\).*/\1/p')
i=0
if [ -n "${TUNEJET_CHECKPOINT_DIR:-}" ]; then i=$(cat "$TUNEJET_CHECKPOINT_DIR/iteration"); fi
while [ "$i" -lt "$ITERS" ]; do
	i=$((i + 1))
	if [ -n "${SLOW:-}" ]; then
		case "$TUNEJET_TRIAL_ID" in *[13579]) sleep "$SLOW" ;; esac
	fi
	loss=$(awk -v x="$x" -v i="$i" 'BEGIN { a = x < 0 ? -x : x; printf "%.17g", (x - 1) * (x - 1) + (1 + a) / i }')
	dir=$(mktemp -d)
	echo "$i" > "$dir/iteration"
	size=$(awk -v x="$x" -v i="$i" 'BEGIN { printf "%.17g", (x + 1) * (x + 1) + 1 / i }')
	out=$("$TUNEJET_BIN" report --checkpoint "$dir" loss="$loss" size="$size")
	rm -rf "$dir"
	echo "$TUNEJET_TRIAL_ID $i" >> "$MARK_DIR/reports"
	if [ "$out" = stop ]; then exit 0; fi
done
