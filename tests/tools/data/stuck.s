; Waits for a semaphore nothing signals: the device reports a deadlock (a kernel fault).
.kernel stuck
.arg out out f32[4,8]
.sem never = 3

.engine sync
.loc 7
    wait never >= 1
