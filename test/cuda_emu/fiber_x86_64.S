/* test/cuda_emu/fiber_x86_64.S — the fiber switch of the emulated GPU's cooperative blocks:
 * saves the callee-saved registers and the FP control words on the current stack, stores the
 * stack pointer, loads the other fiber's and restores its registers. glibc's swapcontext also
 * swaps the signal mask with a system call per switch, which would cost more than the threads'
 * work between barriers.
 *
 * void dgemu_fiber_switch(void **save_sp, void *load_sp);
 * void dgemu_fiber_entry(void);  -- first frame of a new fiber: calls r12(r13) */
    .text
    .globl dgemu_fiber_switch
    .type dgemu_fiber_switch, @function
dgemu_fiber_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size dgemu_fiber_switch, .-dgemu_fiber_switch

    .globl dgemu_fiber_entry
    .type dgemu_fiber_entry, @function
dgemu_fiber_entry:
    movq %r13, %rdi
    call *%r12
    ud2
    .size dgemu_fiber_entry, .-dgemu_fiber_entry
    .section .note.GNU-stack,"",@progbits
