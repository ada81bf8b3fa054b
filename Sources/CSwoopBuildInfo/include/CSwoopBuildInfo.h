#ifndef CSWOOP_BUILD_INFO_H
#define CSWOOP_BUILD_INFO_H

/// The commit this binary was built from (12 hex digits, "-modified" when the work tree had
/// changes), or "" when the build was not given one: Package.swift defines it from the
/// SWOOP_BUILD_COMMIT environment variable, which the scripts that build set from git.
const char *swoop_build_commit(void);

#endif
