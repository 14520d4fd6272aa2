# TAP lines for the test/check_*.sh scripts (sourced): result OK WHAT prints
# "ok N - WHAT" when OK is 1, else "not ok N - WHAT" and sets failed=1.
n=0
failed=0
result() {
	n=$((n + 1))
	if [ "$1" -eq 1 ]; then
		echo "ok $n - $2"
	else
		echo "not ok $n - $2"
		failed=1
	fi
}
