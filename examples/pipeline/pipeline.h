/* The pipeline example's message types and target indices (pipeline_grains.c),
 * shared by its grains and its C client. */
#ifndef PIPELINE_H
#define PIPELINE_H

#define PIPELINE_MSG_TEXT 1   /* pipeline.parse: text of numbers */
#define PIPELINE_MSG_VALUES 1 /* pipeline.square, pipeline.sum: little-endian int64 values */
#define PIPELINE_MSG_TOTAL 2  /* pipeline.sum: the key's running total (reply as for VALUES) */

/* Target indices: each type's targets list (pipeline_grains.c). */
#define PIPELINE_PARSE_TO_SQUARE 0
#define PIPELINE_SQUARE_TO_SUM 0

/* pingpong.ping and pingpong.pong (pingpong_grains.c): message HOPS carries
 * a uint32 count of hops still to go; the grain that finds it at 0 replies
 * with the uint32 hops made (also in aux). */
#define PINGPONG_MSG_HOPS 1
#define PINGPONG_TO_OTHER 0

#endif
