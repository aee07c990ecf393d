// s = s * x[i] + y[i] over float32 arrays, fastmath={'contract'}
// numba 0.68.1, llvmlite 0.50.0, aarch64, target CPU neoverse-n1 (QEMU_CPU=neoverse-n1)
// written by tools/aarch64_asm_samples.py (the hottest basic block of inspect_asm); do not edit
.LBB0_6:
	ldp	s1, s2, [x11, #-4]
	ldp	s3, s4, [x12, #-4]
	add	x9, x9, #2
	add	x11, x11, #8
	add	x12, x12, #8
	cmp	x10, x9
	fmadd	s0, s0, s1, s3
	fmadd	s0, s0, s2, s4
	b.ne	.LBB0_6
	tbz	w7, #0, .LBB0_4
	ldr	s1, [x6, x9, lsl #2]
	ldr	s2, [x8, x9, lsl #2]
	fmadd	s0, s0, s1, s2
	str	s0, [x0]
	mov	w0, wzr
	ret
