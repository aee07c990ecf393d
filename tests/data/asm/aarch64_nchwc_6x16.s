// convbench nchwc tile kernel, nchwc/nchwxc/ic_bn=16/oc_bn=16/reg_n=6/unroll_ker=False, on mb1ic16ih8oc32oh8kh3ph1
// numba 0.68.1, llvmlite 0.50.0, aarch64, target CPU neoverse-n1 (QEMU_CPU=neoverse-n1)
// written by tools/aarch64_asm_samples.py (the hottest basic block of inspect_asm); do not edit
.LBB4_20:
	add	x3, x30, x27
	ldur	s12, [x10, #-192]
	ldur	s14, [x10, #-128]
	ldp	q13, q9, [x3, #32]
	ldp	q10, q11, [x3]
	add	x27, x27, #64
	cmp	x27, #1024
	fmla	v30.4s, v11.4s, v12.s[0]
	fmla	v8.4s, v9.4s, v12.s[0]
	fmla	v27.4s, v11.4s, v14.s[0]
	fmla	v29.4s, v9.4s, v14.s[0]
	fmla	v31.4s, v13.4s, v12.s[0]
	fmla	v25.4s, v10.4s, v12.s[0]
	ldur	s12, [x10, #-64]
	fmla	v28.4s, v13.4s, v14.s[0]
	fmla	v26.4s, v10.4s, v14.s[0]
	fmla	v23.4s, v13.4s, v12.s[0]
	fmla	v22.4s, v11.4s, v12.s[0]
	fmla	v21.4s, v10.4s, v12.s[0]
	fmla	v24.4s, v9.4s, v12.s[0]
	ld1r	{ v14.4s }, [x26], #4
	ldr	s12, [x10, #64]
	fmla	v19.4s, v13.4s, v14.4s
	fmla	v18.4s, v11.4s, v14.4s
	fmla	v17.4s, v10.4s, v14.4s
	fmla	v20.4s, v9.4s, v14.4s
	fmla	v7.4s, v13.4s, v12.s[0]
	fmla	v6.4s, v11.4s, v12.s[0]
	fmla	v5.4s, v10.4s, v12.s[0]
	fmla	v16.4s, v9.4s, v12.s[0]
	ldr	s12, [x10, #128]
	mov	x10, x26
	fmla	v3.4s, v13.4s, v12.s[0]
	fmla	v2.4s, v11.4s, v12.s[0]
	fmla	v1.4s, v10.4s, v12.s[0]
	fmla	v4.4s, v9.4s, v12.s[0]
	b.ne	.LBB4_20
	add	x24, x24, #1
	add	x13, x13, x20
	add	x30, x30, #1024
	cmp	x11, x24
	b.ne	.LBB4_19
	add	x1, x1, #1
	add	x9, x9, x19
	add	x14, x14, x21
	cmp	x12, x1
	b.ne	.LBB4_18
	add	x23, x23, #1
	add	x16, x16, x7
	add	x5, x5, x4
	cmp	x17, x23
	b.ne	.LBB4_17
