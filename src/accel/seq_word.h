/*
 * seq_word.h - accel-private: raising a sequence word (the trigger and
 * release words of accel.h) shared by the backends (accel.c's "none"
 * stream, host.c, the CUDA backend). Not for the layers above.
 */
#ifndef MXA_SEQ_WORD_H
#define MXA_SEQ_WORD_H

#include <stdatomic.h>
#include <stdint.h>

/* *word = max(*word, seq), with release order, never lowering the word.
 * The comparison is cyclic, like the device's wait (cuStreamWaitValue64
 * with GEQ: (int64_t)(*word - value) >= 0); sequence numbers start at 0 and
 * grow by one per operation, so it agrees with a plain < comparison. */
static inline void mxa_store_max(_Atomic uint64_t *word, uint64_t seq)
{
    uint64_t cur = atomic_load_explicit(word, memory_order_relaxed);
    while ((int64_t)(seq - cur) > 0 &&
           !atomic_compare_exchange_weak_explicit(word, &cur, seq, memory_order_release,
                                                  memory_order_relaxed))
        ;
}

#endif
