// Unit tests of runtime/tprt_exec: the collective traffic model behind tpc-run --stats.
#include <stdint.h>

#include "tprt_exec.h"
#include "tprt_test.h"

TPRT_TEST(comm_bytes_follow_the_ring_model) {
  // A group of 4 and a 4096-byte buffer: all-reduce 2·3/4, the others 3/4 of the full buffer
  // (the output of an all-gather, the input of a reduce-scatter or an all-to-all).
  TPRT_EXPECT_EQ_I64(tprt_comm_bytes(TPRT_COMM_ALL_REDUCE, 4, 4096, 4096), 6144);
  TPRT_EXPECT_EQ_I64(tprt_comm_bytes(TPRT_COMM_ALL_GATHER, 4, 1024, 4096), 3072);
  TPRT_EXPECT_EQ_I64(tprt_comm_bytes(TPRT_COMM_REDUCE_SCATTER, 4, 4096, 1024), 3072);
  TPRT_EXPECT_EQ_I64(tprt_comm_bytes(TPRT_COMM_ALL_TO_ALL, 4, 4096, 4096), 3072);
  // Two ranks: an all-reduce moves the whole buffer each way.
  TPRT_EXPECT_EQ_I64(tprt_comm_bytes(TPRT_COMM_ALL_REDUCE, 2, 8192, 8192), 8192);
}

TPRT_TEST(comm_bytes_of_one_rank_and_rounding) {
  TPRT_EXPECT_EQ_I64(tprt_comm_bytes(TPRT_COMM_ALL_REDUCE, 1, 4096, 4096), 0);
  TPRT_EXPECT_EQ_I64(tprt_comm_bytes(TPRT_COMM_ALL_GATHER, 1, 4096, 4096), 0);
  // 2·2·10/3 = 13.33 rounds down.
  TPRT_EXPECT_EQ_I64(tprt_comm_bytes(TPRT_COMM_ALL_REDUCE, 3, 10, 10), 13);
  // Large buffers do not overflow: 8 ranks, 16 GiB.
  TPRT_EXPECT_EQ_I64(tprt_comm_bytes(TPRT_COMM_ALL_REDUCE, 8, INT64_C(1) << 34, INT64_C(1) << 34),
                     (INT64_C(1) << 34) / 4 * 7);
}

TPRT_TEST(comm_kind_names) {
  TPRT_EXPECT_STREQ(tprt_comm_kind_name(TPRT_COMM_ALL_REDUCE), "all_reduce");
  TPRT_EXPECT_STREQ(tprt_comm_kind_name(TPRT_COMM_ALL_GATHER), "all_gather");
  TPRT_EXPECT_STREQ(tprt_comm_kind_name(TPRT_COMM_REDUCE_SCATTER), "reduce_scatter");
  TPRT_EXPECT_STREQ(tprt_comm_kind_name(TPRT_COMM_ALL_TO_ALL), "all_to_all");
}
