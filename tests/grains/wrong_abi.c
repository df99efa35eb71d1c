/* A library that claims another grain ABI (test_grain_libs.sh). */
#include <stddef.h>
#include <stdint.h>

uint32_t gb_grain_library(const void **head);
__attribute__((visibility("default"))) uint32_t gb_grain_library(const void **head)
{
    *head = NULL;
    return 999;
}
