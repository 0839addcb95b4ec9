// libvmtest_handmade.so: functions whose frames the test describes with
// SFrame sections of its own making (handmade_vmtest.cc).  Written in
// assembly so that the layout is known exactly; built WITHOUT --gsframe.
// The .cfi directives only feed .eh_frame (for debuggers).
#include "handmade.h"

asm(R"(
        .text

        .globl  handmade_sp_frame
        .type   handmade_sp_frame, @function
        .p2align 4
handmade_sp_frame:
        .cfi_startproc
        subq    $0x1008, %rsp
.Lsp_after_sub:
        .cfi_def_cfa_offset 0x1010
        call    .Lfp_frame_local
        addq    $0x1008, %rsp
.Lsp_after_add:
        .cfi_def_cfa_offset 8
        ret
        .cfi_endproc
.Lsp_end:
        .size   handmade_sp_frame, .Lsp_end - handmade_sp_frame

        .globl  handmade_fp_frame
        .type   handmade_fp_frame, @function
        .p2align 4
handmade_fp_frame:
.Lfp_frame_local:
        .cfi_startproc
        pushq   %rbp
.Lfp_after_push:
        .cfi_def_cfa_offset 16
        .cfi_offset %rbp, -16
        movq    %rsp, %rbp
.Lfp_after_mov:
        .cfi_def_cfa_register %rbp
        pushq   %rbx
        subq    $24, %rsp
        movq    %rdi, %rax
        movq    %rsi, %rdi
        call    *%rax
        addq    $24, %rsp
        popq    %rbx
        popq    %rbp
.Lfp_after_pop:
        .cfi_def_cfa %rsp, 8
        ret
        .cfi_endproc
.Lfp_end:
        .size   handmade_fp_frame, .Lfp_end - handmade_fp_frame

        .globl  handmade_outermost
        .type   handmade_outermost, @function
        .p2align 4
handmade_outermost:
        .cfi_startproc
        subq    $8, %rsp
        .cfi_def_cfa_offset 16
        movq    %rdi, %rax
        movq    %rsi, %rdi
        call    *%rax
        addq    $8, %rsp
        .cfi_def_cfa_offset 8
        ret
        .cfi_endproc
.Lout_end:
        .size   handmade_outermost, .Lout_end - handmade_outermost

        .globl  handmade_pcmask_stubs
        .type   handmade_pcmask_stubs, @function
        .p2align 4
handmade_pcmask_stubs:
        subq    $8, %rsp
.Lstub_after_sub:
        call    *%rsi
        addq    $8, %rsp
.Lstub_after_add:
        ret
        .balign 16, 0xcc
        .rept   3
        subq    $8, %rsp
        call    *%rsi
        addq    $8, %rsp
        ret
        .balign 16, 0xcc
        .endr
.Lstubs_end:
        .size   handmade_pcmask_stubs, .Lstubs_end - handmade_pcmask_stubs

        .globl  handmade_ioctl_ra_in_r10
        .type   handmade_ioctl_ra_in_r10, @function
        .p2align 4
handmade_ioctl_ra_in_r10:
        .cfi_startproc
        popq    %r10
.Lra_after_pop:
        .cfi_adjust_cfa_offset -8
        .cfi_register %rip, %r10
        movl    $16, %eax
        syscall
        pushq   %r10
.Lra_after_push:
        .cfi_adjust_cfa_offset 8
        .cfi_offset %rip, -8
        ret
        .cfi_endproc
.Lra_end:
        .size   handmade_ioctl_ra_in_r10, .Lra_end - handmade_ioctl_ra_in_r10

        .section .rodata
        .globl  handmade_layout
        .type   handmade_layout, @object
        .p2align 2
handmade_layout:
        .long   .Lsp_end - handmade_sp_frame
        .long   .Lsp_after_sub - handmade_sp_frame
        .long   .Lsp_after_add - handmade_sp_frame
        .long   .Lfp_end - handmade_fp_frame
        .long   .Lfp_after_push - handmade_fp_frame
        .long   .Lfp_after_mov - handmade_fp_frame
        .long   .Lfp_after_pop - handmade_fp_frame
        .long   .Lout_end - handmade_outermost
        .long   .Lstubs_end - handmade_pcmask_stubs
        .long   .Lstub_after_sub - handmade_pcmask_stubs
        .long   .Lstub_after_add - handmade_pcmask_stubs
        .long   .Lra_end - handmade_ioctl_ra_in_r10
        .long   .Lra_after_pop - handmade_ioctl_ra_in_r10
        .long   .Lra_after_push - handmade_ioctl_ra_in_r10
        .size   handmade_layout, . - handmade_layout
        .text
)");
