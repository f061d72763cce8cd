; out = a + b for one 128 x 64 f32 tile: the kernel the trn-run tests launch.
.kernel vector_add
.arg a in f32[128,64]
.arg b in f32[128,64]
.arg out out f32[128,64]

.sem loaded = 0
.sem added = 1
.tile xa = sbuf.f32 p0:128 @0 [1,64]
.tile xb = sbuf.f32 p0:128 @256 [1,64]
.tile y  = sbuf.f32 p0:128 @512 [1,64]

.engine sync
    dma_copy q0 xa, hbm(a).f32 rows[64,128] [1,64]    signal loaded += 1
    dma_copy q1 xb, hbm(b).f32 rows[64,128] [1,64]    signal loaded += 1
    wait added >= 1
    dma_copy q0 hbm(out).f32 rows[64,128] [1,64], y

.engine vector
    wait loaded >= 2
    tensor_tensor add y, xa, xb                        signal added = 1
