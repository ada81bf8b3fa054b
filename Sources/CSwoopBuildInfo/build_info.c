#include "CSwoopBuildInfo.h"

#ifndef SWOOP_BUILD_COMMIT
#define SWOOP_BUILD_COMMIT ""
#endif

const char *swoop_build_commit(void) { return SWOOP_BUILD_COMMIT; }
