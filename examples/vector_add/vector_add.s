; out = a + b for f32 [128, 2048]: one row per SBUF partition, 2048 columns in four chunks of
; 512 so the DMA engines, the Vector engine and the stores overlap.
;
; The Sync engine loads a's chunks and the GpSimd engine b's, each chunk on its own DMA queue
; (q0-q3 and q4-q7), and every load signals its chunk's semaphore. The Vector engine adds a
; chunk once both halves are in (loadedN >= 2) and counts the chunks it has added; the Sync
; engine stores each chunk (q8-q11) as soon as that count reaches it.
.kernel vector_add
.arg a in f32[128,2048]
.arg b in f32[128,2048]
.arg out out f32[128,2048]

.sem loaded0 = 0              ; a and b of chunk N are in SBUF when loadedN reaches 2
.sem loaded1 = 1
.sem loaded2 = 2
.sem loaded3 = 3
.sem added = 4                ; chunks the Vector engine has added (in order)

; SBUF: 8 KiB per partition for each of a, b and out; chunk N starts at byte N * 2048.
.tile a0 = sbuf.f32 p0:128 @0 [1,512]
.tile a1 = sbuf.f32 p0:128 @2048 [1,512]
.tile a2 = sbuf.f32 p0:128 @4096 [1,512]
.tile a3 = sbuf.f32 p0:128 @6144 [1,512]
.tile b0 = sbuf.f32 p0:128 @8192 [1,512]
.tile b1 = sbuf.f32 p0:128 @10240 [1,512]
.tile b2 = sbuf.f32 p0:128 @12288 [1,512]
.tile b3 = sbuf.f32 p0:128 @14336 [1,512]
.tile y0 = sbuf.f32 p0:128 @16384 [1,512]
.tile y1 = sbuf.f32 p0:128 @18432 [1,512]
.tile y2 = sbuf.f32 p0:128 @20480 [1,512]
.tile y3 = sbuf.f32 p0:128 @22528 [1,512]

.engine sync
    dma_copy q0 a0, hbm(a).f32 @0 rows[2048,128] [1,512]       signal loaded0 += 1
    dma_copy q1 a1, hbm(a).f32 @2048 rows[2048,128] [1,512]    signal loaded1 += 1
    dma_copy q2 a2, hbm(a).f32 @4096 rows[2048,128] [1,512]    signal loaded2 += 1
    dma_copy q3 a3, hbm(a).f32 @6144 rows[2048,128] [1,512]    signal loaded3 += 1
    wait added >= 1
    dma_copy q8 hbm(out).f32 @0 rows[2048,128] [1,512], y0
    wait added >= 2
    dma_copy q9 hbm(out).f32 @2048 rows[2048,128] [1,512], y1
    wait added >= 3
    dma_copy q10 hbm(out).f32 @4096 rows[2048,128] [1,512], y2
    wait added >= 4
    dma_copy q11 hbm(out).f32 @6144 rows[2048,128] [1,512], y3

.engine gpsimd
    dma_copy q4 b0, hbm(b).f32 @0 rows[2048,128] [1,512]       signal loaded0 += 1
    dma_copy q5 b1, hbm(b).f32 @2048 rows[2048,128] [1,512]    signal loaded1 += 1
    dma_copy q6 b2, hbm(b).f32 @4096 rows[2048,128] [1,512]    signal loaded2 += 1
    dma_copy q7 b3, hbm(b).f32 @6144 rows[2048,128] [1,512]    signal loaded3 += 1

.engine vector
    tensor_tensor add y0, a0, b0   wait loaded0 >= 2   signal added += 1
    tensor_tensor add y1, a1, b1   wait loaded1 >= 2   signal added += 1
    tensor_tensor add y2, a2, b2   wait loaded2 >= 2   signal added += 1
    tensor_tensor add y3, a3, b3   wait loaded3 >= 2   signal added += 1
