/*
 * Hand-written functions that realign the stack and describe their CFA
 * with DWARF expressions written as .cfi_escape bytes, the way OpenSSL's
 * perlasm and GCC's DRAP code do (see realign_workload.c).  Each is
 *
 *   void rw_xxx(void (*fn)(uint64_t *), uint64_t *arg, uint64_t spins)
 *
 * spinning `spins` rounds in its own body (samples whose topmost frame is
 * here), then calling fn(arg) (samples with this frame below a C one).
 */
	.text

/*
 * The body's work: \reg hashed RCX times (RCX counts down to 0).
 */
.macro SPIN reg
1:	imul	$0x5851f42d, \reg, \reg
	add	$0x14057b7e, \reg
	dec	%rcx
	jnz	1b
.endm

/*
 * rw_xxx(fn, arg, spins) on a realigned frame with 48(%rsp) free: spins
 * rounds from spins, the result stored at 48(%rsp), then fn(arg).  RBX
 * and RBP (saved by the caller of the macro) hold fn and arg.
 */
.macro SPIN_THEN_CALL
	mov	%rdi, %rbx
	mov	%rsi, %rbp
	mov	%rdx, %rcx
	mov	%rdx, %rax
	SPIN	%rax
	mov	%rax, 48(%rsp)
	mov	%rbp, %rdi
	call	*%rbx
.endm

/*
 * The CFA is saved on the realigned stack: CFA = *(RSP + 40), which
 * SFrame v3 says with a flexible FDE.  RBP is a general register in the
 * body (as in perlasm), the caller's saved at CFA - 24.
 */
	.globl	rw_saved_cfa
	.type	rw_saved_cfa, @function
rw_saved_cfa:
	.cfi_startproc
	push	%rbx
	.cfi_adjust_cfa_offset 8
	.cfi_offset %rbx, -16
	push	%rbp
	.cfi_adjust_cfa_offset 8
	.cfi_offset %rbp, -24
	lea	24(%rsp), %rax
	.cfi_def_cfa %rax, 0
	sub	$96, %rsp
	and	$-64, %rsp
	mov	%rax, 40(%rsp)
	/* DW_CFA_def_cfa_expression: DW_OP_breg7 (rsp) 40; DW_OP_deref */
	.cfi_escape 0x0f, 0x03, 0x77, 0x28, 0x06
	SPIN_THEN_CALL
	mov	40(%rsp), %rax
	.cfi_def_cfa %rax, 0
	lea	-24(%rax), %rsp
	.cfi_def_cfa %rsp, 24
	pop	%rbp
	.cfi_def_cfa_offset 16
	.cfi_restore %rbp
	pop	%rbx
	.cfi_def_cfa_offset 8
	.cfi_restore %rbx
	ret
	.cfi_endproc
	.size	rw_saved_cfa, .-rw_saved_cfa

/*
 * GCC's DRAP: R10 holds the CFA while the stack is realigned, then the
 * frame pointer's frame keeps a copy: CFA = *(RBP - 8), the caller's RBP
 * at *(RBP + 0) (the form gas translates into SFrame v3 itself).
 */
	.globl	rw_drap
	.type	rw_drap, @function
rw_drap:
	.cfi_startproc
	lea	8(%rsp), %r10
	.cfi_def_cfa %r10, 0
	and	$-64, %rsp
	push	-8(%r10)
	push	%rbp
	mov	%rsp, %rbp
	/* DW_CFA_expression: rbp at DW_OP_breg6 (rbp) 0 */
	.cfi_escape 0x10, 0x06, 0x02, 0x76, 0x00
	push	%r10
	/* DW_CFA_def_cfa_expression: DW_OP_breg6 (rbp) -8; DW_OP_deref */
	.cfi_escape 0x0f, 0x03, 0x76, 0x78, 0x06
	push	%rbx
	/* DW_CFA_expression: rbx at DW_OP_breg6 (rbp) -16 */
	.cfi_escape 0x10, 0x03, 0x02, 0x76, 0x70
	sub	$32, %rsp
	mov	%rdi, %rbx
	mov	%rsi, (%rsp)
	mov	%rdx, %rcx
	mov	%rdx, %rax
	SPIN	%rax
	mov	%rax, 8(%rsp)
	mov	(%rsp), %rdi
	call	*%rbx
	add	$32, %rsp
	pop	%rbx
	.cfi_restore %rbx
	pop	%r10
	.cfi_def_cfa %r10, 0
	pop	%rbp
	.cfi_restore %rbp
	lea	-8(%r10), %rsp
	.cfi_def_cfa %rsp, 8
	ret
	.cfi_endproc
	.size	rw_drap, .-rw_drap

/*
 * perlasm's entry: the entry RSP kept in RAX (CFA = RAX + 8), RBX and RBP
 * pushed, the stack realigned to 64 bytes.
 */
.macro PERLASM_ENTRY
	mov	%rsp, %rax
	.cfi_def_cfa_register %rax
	push	%rbx
	.cfi_offset %rbx, -16
	push	%rbp
	.cfi_offset %rbp, -24
	sub	$96, %rsp
	and	$-64, %rsp
.endm

/*
 * OpenSSL's perlasm (sha256_block_data_order_avx2 and others): the entry
 * RSP is saved, and `.cfi_cfa_expression %rsp+40,deref,+8` says
 * CFA = *(RSP + 40) + 8.  SFrame v3 has no rule adding after the load: the
 * body's row is written with this project's extension (SFRAME_F_X_CFA_ADDEND).
 */
	.globl	rw_perlasm
	.type	rw_perlasm, @function
rw_perlasm:
	.cfi_startproc
	PERLASM_ENTRY
	mov	%rax, 40(%rsp)
	/* DW_CFA_def_cfa_expression: DW_OP_breg7 (rsp) 40; DW_OP_deref;
	   DW_OP_plus_uconst 8 */
	.cfi_escape 0x0f, 0x05, 0x77, 0x28, 0x06, 0x23, 0x08
	SPIN_THEN_CALL
	mov	40(%rsp), %rsi
	.cfi_def_cfa %rsi, 8
	mov	-16(%rsi), %rbp
	.cfi_restore %rbp
	mov	-8(%rsi), %rbx
	.cfi_restore %rbx
	lea	(%rsi), %rsp
	.cfi_def_cfa_register %rsp
	ret
	.cfi_endproc
	.size	rw_perlasm, .-rw_perlasm

/*
 * OpenSSL's aesni_gcm_encrypt: the entry RSP is kept in RAX for the whole
 * body, CFA = RAX + 8 (a v3 flexible row), around a call to an assembly
 * leaf.  Below the leaf RAX is not known, only guessed from the leaf's (the
 * module's caller-of-the-topmost-frame rule).
 *
 *   void rw_rax_cfa(uint64_t *arg, uint64_t spins)
 *	calls rw_rax_leaf, which leaves RAX alone (as _aesni_ctr32_ghash_6x
 *	does): the guess is right.
 *   void rw_rax_cfa_clobbered(uint64_t *arg, uint64_t spins, void *heap)
 *	calls rw_rax_clobber_leaf, which holds heap in RAX while it spins
 *	(and restores RAX before it returns): the guess is wrong, and must
 *	stop the walk instead of making up frames.
 */
/* *%rdi hashed %rsi times, with RCX and R8 (RAX untouched). */
.macro SPIN_ON_ARG
	mov	%rsi, %rcx
	mov	(%rdi), %r8
	SPIN	%r8
	mov	%r8, (%rdi)
.endm

.macro RAX_CFA name, leaf
	.globl	\name
	.type	\name, @function
\name:
	.cfi_startproc
	PERLASM_ENTRY
	mov	%rdi, %rbx
	mov	%rsi, %rbp
	SPIN_ON_ARG
	mov	%rbx, %rdi
	mov	%rbp, %rsi
	call	\leaf
	mov	-16(%rax), %rbp
	.cfi_restore %rbp
	mov	-8(%rax), %rbx
	.cfi_restore %rbx
	mov	%rax, %rsp
	.cfi_def_cfa_register %rsp
	ret
	.cfi_endproc
	.size	\name, .-\name
.endm

/* Leaves: spin on (%rdi) for %rsi rounds; RAX = %rdx meanwhile if nonzero. */
.macro RAX_LEAF name
	.type	\name, @function
\name:
	.cfi_startproc
	mov	%rax, %r9
	test	%rdx, %rdx
	jz	2f
	mov	%rdx, %rax
2:	SPIN_ON_ARG
	mov	%r9, %rax
	ret
	.cfi_endproc
	.size	\name, .-\name
.endm

	RAX_CFA rw_rax_cfa, rw_rax_leaf
	RAX_CFA rw_rax_cfa_clobbered, rw_rax_clobber_leaf
	RAX_LEAF rw_rax_leaf
	RAX_LEAF rw_rax_clobber_leaf

	.section .note.GNU-stack, "", @progbits
