; y = alpha * x + beta for one 128 x 64 f32 tile, with alpha and beta passed at launch: one
; binary for every alpha and beta (trn-run --scalar alpha=2.5 --scalar beta=-1).
.kernel scale_bias
.arg x in f32[128,64]
.arg alpha scalar f32
.arg beta scalar f32
.arg y out f32[128,64]

.sem loaded = 0
.sem done = 1
.tile xt = sbuf.f32 p0:128 @0 [1,64]
.tile yt = sbuf.f32 p0:128 @256 [1,64]

.engine sync
    dma_copy q0 xt, hbm(x).f32 rows[64,128] [1,64]    signal loaded += 1
    wait done >= 1
    dma_copy q0 hbm(y).f32 rows[64,128] [1,64], yt

.engine scalar
    wait loaded >= 1
    activation identity yt, xt scale=alpha bias=beta   signal done = 1
