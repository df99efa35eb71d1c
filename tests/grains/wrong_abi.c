/* A library that claims another grain ABI (test_grain_libs.sh): 999, or
 * GB_TEST_ABI (3: built before the handler context named the arenas of other devices). */
#include <stddef.h>
#include <stdint.h>

uint32_t gb_grain_library(const void **head);
__attribute__((visibility("default"))) uint32_t gb_grain_library(const void **head)
{
    *head = NULL;
#ifdef GB_TEST_ABI
    return GB_TEST_ABI;
#else
    return 999;
#endif
}
