# A function whose FDE nests DW_CFA_remember_state 2,000,000 deep: the
# .eh_frame an unbounded CFA interpreter turns into gigabytes.
	.text
	.globl hostile_spin
	.type hostile_spin, @function
hostile_spin:
	.cfi_startproc
	subq $8, %rsp
	.cfi_def_cfa_offset 16
	.rept 2000000
	.cfi_remember_state
	.endr
	addq $8, %rsp
	.cfi_def_cfa_offset 8
	ret
	.cfi_endproc
	.size hostile_spin, .-hostile_spin
	.section .note.GNU-stack,"",@progbits
