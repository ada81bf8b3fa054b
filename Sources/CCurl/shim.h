#ifndef SWOOP_CCURL_SHIM_H
#define SWOOP_CCURL_SHIM_H

#include <curl/curl.h>
#include <fcntl.h>
#include <sys/socket.h>

// curl_easy_setopt, curl_easy_getinfo and curl_multi_setopt are variadic, and Swift cannot call
// variadic C functions. Each shim below fixes the argument to exactly the C type curl reads with
// va_arg for that option class: `long` for CURLOPTTYPE_LONG, `curl_off_t` for CURLOPTTYPE_OFF_T,
// a data pointer for CURLOPTTYPE_OBJECTPOINT/STRINGPOINT/SLISTPOINT/CBPOINT and a function pointer
// for CURLOPTTYPE_FUNCTIONPOINT. Passing an `int` where curl reads a `long` is undefined behaviour,
// which is why there is no generic integer shim.

/// For CURLOPTTYPE_LONG (and CURLOPTTYPE_VALUES) options.
static inline CURLcode swoop_easy_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

/// For CURLOPTTYPE_OFF_T options (sizes, offsets and speeds that may exceed 2 GiB).
static inline CURLcode swoop_easy_setopt_off_t(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}

/// For string, object, slist and callback-data pointer options. curl copies strings it is given
/// (since 7.17.0); slists and callback data must outlive the transfer.
static inline CURLcode swoop_easy_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return curl_easy_setopt(handle, option, value);
}

/// For CURLOPT_WRITEFUNCTION and CURLOPT_HEADERFUNCTION, which share curl_write_callback's type.
static inline CURLcode swoop_easy_setopt_write_callback(CURL *handle, CURLoption option,
                                                        curl_write_callback callback) {
    return curl_easy_setopt(handle, option, callback);
}

/// Opens curl's sockets close-on-exec, so that a process the application starts does not inherit
/// them (and hold a download's connections open after Swoop has closed them).
static curl_socket_t swoop_open_socket_close_on_exec(void *clientp, curlsocktype purpose,
                                                     struct curl_sockaddr *address) {
    (void)clientp;
    (void)purpose;
#ifdef SOCK_CLOEXEC
    return socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
#else
    curl_socket_t fd = socket(address->family, address->socktype, address->protocol);
    if (fd != CURL_SOCKET_BAD) fcntl(fd, F_SETFD, FD_CLOEXEC);
    return fd;
#endif
}

/// Makes `handle` open its sockets with `swoop_open_socket_close_on_exec`.
static inline CURLcode swoop_easy_open_sockets_close_on_exec(CURL *handle) {
    return curl_easy_setopt(handle, CURLOPT_OPENSOCKETFUNCTION, swoop_open_socket_close_on_exec);
}

/// For CURLINFO_LONG items.
static inline CURLcode swoop_easy_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}

/// For CURLINFO_OFF_T items (the `*_TIME_T` timings, in microseconds).
static inline CURLcode swoop_easy_getinfo_off_t(CURL *handle, CURLINFO info, curl_off_t *value) {
    return curl_easy_getinfo(handle, info, value);
}

/// For CURLINFO_PRIVATE.
static inline CURLcode swoop_easy_getinfo_pointer(CURL *handle, CURLINFO info, void **value) {
    return curl_easy_getinfo(handle, info, value);
}

/// For CURLSHOPT_SHARE and CURLSHOPT_UNSHARE, whose argument is a `curl_lock_data` read as an int.
static inline CURLSHcode swoop_share_setopt_lock_data(CURLSH *share, CURLSHoption option, curl_lock_data data) {
    return curl_share_setopt(share, option, data);
}

/// For CURLMOPT options of type long.
static inline CURLMcode swoop_multi_setopt_long(CURLM *handle, CURLMoption option, long value) {
    return curl_multi_setopt(handle, option, value);
}

#endif
