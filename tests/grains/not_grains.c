/* A shared library with no grain types (test_grain_libs.sh). */
int gb_test_not_grains(void);
int gb_test_not_grains(void) { return 1; }
