# What `sframe-client dump` prints for a section, from what binutils 2.40's
# `readelf --sframe` prints for it: the same text, but for each FDE of more
# than CAP rows (SFRAME_MAX_FRES_PER_FDE), whose rows the dump replaces with
# the mark "skipped: N FREs > CAP (SFRAME_MAX_FRES_PER_FDE): no rows".
#   awk -v cap=8192 -v want=1 -f readelf_skipped.awk prog.readelf
# Exits 1 unless exactly `want` FDEs were above CAP (so that a compiler
# whose output no longer reaches the cap fails the test, not passes it).
function flush(   i) {
	if (!in_fde)
		return
	print header
	if (n > cap) {
		printf "    skipped: %d FREs > %d (SFRAME_MAX_FRES_PER_FDE): no rows\n", n, cap
		skipped++
	} else {
		print columns
		for (i = 0; i < n; i++)
			print rows[i]
	}
	in_fde = 0
}
/^    func idx / { flush(); header = $0; columns = ""; n = 0; in_fde = 1; next }
in_fde && /^    STARTPC/ { columns = $0; next }
in_fde && /^    [0-9a-f][0-9a-f]*  / { rows[n++] = $0; next }
{ flush(); print }
END {
	flush()
	if (skipped != want) {
		printf "readelf_skipped.awk: %d FDEs above %d rows, not %d\n", skipped, cap, want > "/dev/stderr"
		exit 1
	}
}
