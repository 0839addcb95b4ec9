# Hand-written CFI for the differential test (tests/libsframe_diff), as
# gas 2.47 turns it into SFrame version 3: signal-frame trampolines
# (.cfi_signal_frame: the FDE's signal bit), CFAs on other registers than
# RSP and RBP and loaded ones, the RA and the FP in registers or at other
# slots (flexible FDEs), .cfi_remember_state/.cfi_restore_state, the
# outermost frame (.cfi_undefined %rip), 2- and 4-byte data words and a
# body over 64 KiB (4-byte FRE start offsets).  Never run: only its
# .sframe is read.  Linked as a shared library (-nostdlib).

	.text

# A signal trampoline as the kernel enters it: the frame is the signal
# frame, RSP points into it.
	.globl	sig_restore
	.type	sig_restore, @function
	nop
sig_restore:
	.cfi_startproc simple
	.cfi_signal_frame
	.cfi_def_cfa %rsp, 160
	.cfi_offset %rbp, -40
	.cfi_offset %rip, -8
	mov	$15, %eax
	syscall
	hlt
	.cfi_endproc
	.size	sig_restore, .-sig_restore

# A signal handler-like frame with ordinary pushes and pops.
	.globl	sig_push
	.type	sig_push, @function
sig_push:
	.cfi_startproc
	.cfi_signal_frame
	push	%rbp
	.cfi_adjust_cfa_offset 8
	.cfi_offset %rbp, -16
	mov	%rsp, %rbp
	.cfi_def_cfa_register %rbp
	nop
	pop	%rbp
	.cfi_def_cfa %rsp, 8
	.cfi_restore %rbp
	ret
	.cfi_endproc
	.size	sig_push, .-sig_push

# A signal frame whose CFA is on another register: flexible and signal.
	.globl	sig_flex
	.type	sig_flex, @function
sig_flex:
	.cfi_startproc simple
	.cfi_signal_frame
	.cfi_def_cfa %rsp, 8
	mov	%rsp, %rbx
	.cfi_def_cfa %rbx, 8
	sub	$256, %rsp
	nop
	mov	%rbx, %rsp
	.cfi_def_cfa %rsp, 8
	ret
	.cfi_endproc
	.size	sig_flex, .-sig_flex

# CFA on RBX, with .cfi_remember_state/.cfi_restore_state around an early
# return.
	.globl	cfa_rbx
	.type	cfa_rbx, @function
cfa_rbx:
	.cfi_startproc
	push	%rbx
	.cfi_def_cfa_offset 16
	.cfi_offset %rbx, -16
	mov	%rsp, %rbx
	.cfi_def_cfa_register %rbx
	sub	$64, %rsp
	test	%edi, %edi
	jz	1f
	.cfi_remember_state
	mov	%rbx, %rsp
	.cfi_def_cfa_register %rsp
	pop	%rbx
	.cfi_def_cfa_offset 8
	.cfi_restore %rbx
	ret
	.cfi_restore_state
1:	nop
	.cfi_remember_state
	add	$8, %rsp
	nop
	.cfi_restore_state
	mov	%rbx, %rsp
	.cfi_def_cfa %rsp, 16
	pop	%rbx
	.cfi_def_cfa_offset 8
	.cfi_restore %rbx
	ret
	.cfi_endproc
	.size	cfa_rbx, .-cfa_rbx

# Nested remember/restore with the frame pointer.
	.globl	nested_state
	.type	nested_state, @function
nested_state:
	.cfi_startproc
	push	%rbp
	.cfi_def_cfa_offset 16
	.cfi_offset %rbp, -16
	mov	%rsp, %rbp
	.cfi_def_cfa_register %rbp
	push	%r12
	.cfi_offset %r12, -24
	.cfi_remember_state
	.cfi_remember_state
	pop	%r12
	.cfi_restore %r12
	pop	%rbp
	.cfi_def_cfa %rsp, 8
	.cfi_restore %rbp
	ret
	.cfi_restore_state
	nop
	leave
	.cfi_def_cfa %rsp, 8
	.cfi_restore %rbp
	ret
	.cfi_restore_state
	nop
	pop	%r12
	pop	%rbp
	.cfi_def_cfa %rsp, 8
	ret
	.cfi_endproc
	.size	nested_state, .-nested_state

# A DRAP-like realignment on R12 (not gcc's R10): the caller's RBP saved
# relative to the CFA, then kept in R13 (.cfi_register).
	.globl	cfa_r12
	.type	cfa_r12, @function
cfa_r12:
	.cfi_startproc
	lea	8(%rsp), %r12
	.cfi_def_cfa %r12, 0
	and	$-64, %rsp
	push	-8(%r12)
	push	%rbp
	.cfi_offset %rbp, -24
	mov	%rsp, %rbp
	mov	%rbp, %r13
	.cfi_register %rbp, %r13
	nop
	pop	%rbp
	.cfi_restore %rbp
	lea	-8(%r12), %rsp
	.cfi_def_cfa %rsp, 8
	ret
	.cfi_endproc
	.size	cfa_r12, .-cfa_r12

# Loaded CFA, as gcc describes DRAP frames: CFA = *(RBP - 8), the caller's
# RBP at *(RBP).
	.globl	cfa_deref
	.type	cfa_deref, @function
cfa_deref:
	.cfi_startproc
	lea	8(%rsp), %r10
	.cfi_def_cfa %r10, 0
	and	$-32, %rsp
	push	-8(%r10)
	push	%rbp
	mov	%rsp, %rbp
	.cfi_escape 0x10,0x6,0x2,0x76,0
	push	%r10
	.cfi_escape 0xf,0x3,0x76,0x78,0x6
	nop
	pop	%r10
	.cfi_def_cfa %r10, 0
	pop	%rbp
	lea	-8(%r10), %rsp
	.cfi_def_cfa %rsp, 8
	ret
	.cfi_endproc
	.size	cfa_deref, .-cfa_deref

# The outermost frame: the RA is undefined.
	.globl	outermost
	.type	outermost, @function
outermost:
	.cfi_startproc
	.cfi_undefined %rip
	xor	%ebp, %ebp
	call	cfa_rbx
	hlt
	.cfi_endproc
	.size	outermost, .-outermost

# The RA at another slot than CFA - 8, then in a register.
	.globl	ra_moves
	.type	ra_moves, @function
ra_moves:
	.cfi_startproc
	sub	$8, %rsp
	.cfi_def_cfa_offset 16
	nop
	.cfi_offset %rip, -16
	nop
	add	$8, %rsp
	.cfi_def_cfa_offset 8
	.cfi_offset %rip, -8
	pop	%rax
	.cfi_def_cfa_offset 0
	.cfi_register %rip, %rax
	nop
	push	%rax
	.cfi_def_cfa_offset 8
	.cfi_offset %rip, -8
	ret
	.cfi_endproc
	.size	ra_moves, .-ra_moves

# .cfi_rel_offset and .cfi_same_value.
	.globl	same_value
	.type	same_value, @function
same_value:
	.cfi_startproc
	push	%rbp
	.cfi_def_cfa_offset 16
	.cfi_rel_offset %rbp, 0
	mov	%rsp, %rbp
	.cfi_def_cfa_register %rbp
	nop
	.cfi_same_value %rbp
	nop
	leave
	.cfi_def_cfa %rsp, 8
	ret
	.cfi_endproc
	.size	same_value, .-same_value

# Large offsets: 4-byte data words in a default FDE, 2- and 4-byte ones in
# a flexible FDE.
	.globl	big_default
	.type	big_default, @function
big_default:
	.cfi_startproc
	sub	$100000, %rsp
	.cfi_def_cfa_offset 100008
	push	%rbp
	.cfi_def_cfa_offset 100016
	.cfi_offset %rbp, -100016
	nop
	pop	%rbp
	.cfi_restore %rbp
	.cfi_def_cfa_offset 100008
	add	$100000, %rsp
	.cfi_def_cfa_offset 8
	ret
	.cfi_endproc
	.size	big_default, .-big_default

	.globl	big_flex
	.type	big_flex, @function
big_flex:
	.cfi_startproc
	lea	8(%rsp), %r12
	.cfi_def_cfa %r12, 0
	sub	$40000, %rsp
	nop
	.cfi_def_cfa %r12, 40000
	nop
	push	%rbp
	.cfi_offset %rbp, -40016
	nop
	.cfi_def_cfa %rbx, 1000
	nop
	.cfi_def_cfa %r15, -300
	nop
	pop	%rbp
	.cfi_restore %rbp
	.cfi_def_cfa %rsp, 8
	ret
	.cfi_endproc
	.size	big_flex, .-big_flex

# A body over 64 KiB: FRE start offsets of 4 bytes, rows on both sides.
	.globl	huge_body
	.type	huge_body, @function
huge_body:
	.cfi_startproc
	push	%rbp
	.cfi_def_cfa_offset 16
	.cfi_offset %rbp, -16
	push	%rbx
	.cfi_def_cfa_offset 24
	.cfi_offset %rbx, -24
	.skip	70000, 0x90
	mov	%rsp, %rbx
	.cfi_def_cfa_register %rbx
	.skip	300, 0x90
	mov	%rbx, %rsp
	.cfi_def_cfa_register %rsp
	pop	%rbx
	.cfi_def_cfa_offset 16
	.cfi_restore %rbx
	pop	%rbp
	.cfi_def_cfa_offset 8
	.cfi_restore %rbp
	ret
	.cfi_endproc
	.size	huge_body, .-huge_body

# A body between 256 bytes and 64 KiB: 2-byte start offsets, in a
# flexible FDE.
	.globl	mid_flex
	.type	mid_flex, @function
mid_flex:
	.cfi_startproc
	push	%r14
	.cfi_def_cfa_offset 16
	.cfi_offset %r14, -16
	mov	%rsp, %r14
	.cfi_def_cfa_register %r14
	.skip	1000, 0x90
	push	%rbp
	.cfi_offset %rbp, -24
	.skip	1000, 0x90
	pop	%rbp
	.cfi_restore %rbp
	mov	%r14, %rsp
	.cfi_def_cfa_register %rsp
	pop	%r14
	.cfi_def_cfa_offset 8
	ret
	.cfi_endproc
	.size	mid_flex, .-mid_flex

	.section .note.GNU-stack,"",@progbits
