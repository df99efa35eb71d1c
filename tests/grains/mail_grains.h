/* Message types of the messaging test grains (mail_grains.c). */
#ifndef MAIL_GRAINS_H
#define MAIL_GRAINS_H

enum {
    MT_HOPS = 1,       /* mt.a, mt.b: {uint32 left, uint32 made} -> {uint32 made} */
    MT_SEND = 2,       /* mt.a: {uint32 n, uint32 first} -> n notes to mt.sink, reply {n} */
    MT_BAD_TARGET = 3, /* mt.a: forwards to target index 9 (it declares 2) */
    MT_OVERSIZED = 4,  /* mt.a: forwards a record as large as its out buffer */
    MT_CYCLE = 5,      /* mt.a, mt.b: forward to each other forever (the hop limit ends it) */
    MT_FANOUT = 6,     /* mt.a, mt.b: forward and send to each other: doubling every hop */
    MT_TO_SINK = 7,    /* mt.a: forwards to mt.sink NOTE */
    MT_BIG = 8,        /* mt.a: {uint32 n} -> forwards n bytes (byte i = i * 7) to mt.b BYTES */
    MT_BYTES = 9,      /* mt.b: any record -> {uint32 length, uint32 sum of its bytes} */
    MT_SCRIBBLE = 10,  /* mt.a: sends a note to mt.sink, then (a bug) marks it a forward and replies */
    MT_LOST_FWD = 11,  /* mt.a: sends a note, its forward refused for room, returns FORWARDED anyway */
    MT_WALK = 12,      /* mt.a, mt.b: {uint32 left, uint32 made} as MT_HOPS, each hop to the next key */
    MT_FWD_SEQ = 13,   /* mt.a: {uint64 number} -> forwarded to mt.sink as that NOTE (its reply comes back) */
    MT_BAD_STATUS = 14, /* mt.a: returns a status of the dispatch's own (GB_SLOT_LINKED): a handler's bug */
    MT_NOTE = 1,       /* mt.sink: {uint64 number} or empty -> {uint64 count, uint64 out of order} */
    MT_GET = 2,        /* mt.sink: -> {uint64 count, uint64 out of order} */
    MT_SLOW = 3,       /* mt.sink: {uint32 ms} -> busy that long, then as MT_GET (a busy kernel) */
};
/* Target indices (mt.a's targets: mt.b, mt.sink; mt.b's: mt.a). */
#define MT_TO_OTHER 0
#define MT_TARGET_SINK 1

#endif
