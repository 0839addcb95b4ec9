# Differences between this project's decoder and libsframe 2.47 found by
# the differential test, kept out of its corpus (which must agree on every
# PC) until the decoder changes.  corpus.sh adds this file to the corpus
# as known_diffs.so when LIBSFRAME_V3_KNOWN_DIFFS=1.
#
# gas 2.47 turns DW_CFA_expression for RBP with a base register other than
# RBP (DW_OP_breg3, DW_OP_breg7, ...: "RBP saved at *(reg + N)") into a
# flexible FRE whose FP control word is 0xfffffffb (register number
# 0x1fffffff, dereferenced), where DW_OP_breg6 gives register 6 (as in
# gcc's DRAP code).  libsframe returns the row (readelf --sframe prints
# "(r536870911+16)"); this decoder refuses the FRE (-EINVAL: register above
# 255), so every lookup at or after it in the function fails, and
# sframe_validate() refuses the whole section (-EINVAL): the module would
# not register any of the object's unwind information for one FRE.
	.text
	.globl	fp_saved_via_rbx
	.type	fp_saved_via_rbx, @function
fp_saved_via_rbx:
	.cfi_startproc
	push	%rbp
	.cfi_def_cfa_offset 16
	.cfi_offset %rbp, -16
	mov	%rsp, %rbp
	.cfi_escape 0x10,0x6,0x2,0x73,0x10	# RBP at *(RBX + 16)
	nop
	pop	%rbp
	.cfi_def_cfa %rsp, 8
	.cfi_restore %rbp
	ret
	.cfi_endproc
	.size	fp_saved_via_rbx, .-fp_saved_via_rbx

	.globl	fp_saved_via_rsp
	.type	fp_saved_via_rsp, @function
fp_saved_via_rsp:
	.cfi_startproc
	push	%rbp
	.cfi_def_cfa_offset 16
	.cfi_escape 0x10,0x6,0x2,0x77,0x0	# RBP at *(RSP + 0)
	nop
	pop	%rbp
	.cfi_def_cfa_offset 8
	.cfi_restore %rbp
	ret
	.cfi_endproc
	.size	fp_saved_via_rsp, .-fp_saved_via_rsp

	.section .note.GNU-stack,"",@progbits
