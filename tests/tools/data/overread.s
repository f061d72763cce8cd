; Reads past the end of its input: the launch faults at run time, on line 12 of this file (the
; trn-run tests check that the fault record names it).
.kernel overread
.arg a in f32[128,64]
.arg out out f32[128,64]

.tile x = sbuf.f32 p0:128 @0 [1,64]

.engine sync
    dma_copy q0 x, hbm(a).f32 rows[64,128] [1,64]
    ; the second row block starts 64 rows in: half of it is past the argument
    dma_copy q1 x, hbm(a).f32 @16384 rows[64,128] [1,64]
    dma_copy q0 hbm(out).f32 rows[64,128] [1,64], x
