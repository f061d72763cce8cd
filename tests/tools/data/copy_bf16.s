; y = x for a 4 x 8 bf16 array, through SBUF: checks bf16 arguments pass as raw bits.
.kernel copy_bf16
.arg x in bf16[4,8]
.arg y out bf16[4,8]

.sem loaded = 0
.tile t = sbuf.bf16 p0:4 @0 [1,8]

.engine sync
    dma_copy q0 t, hbm(x).bf16 rows[8,4] [1,8]    signal loaded += 1
    wait loaded >= 1
    dma_copy q0 hbm(y).bf16 rows[8,4] [1,8], t
