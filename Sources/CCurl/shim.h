#ifndef CCURL_SHIM_H
#define CCURL_SHIM_H
#include <curl/curl.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

// curl_easy_setopt, curl_easy_getinfo and curl_multi_setopt are variadic, which Swift cannot call:
// one typed wrapper per argument kind. CURLVERSION_NOW is a macro Swift cannot import.

static inline CURLcode ccurl_easy_setopt_long(CURL *h, CURLoption o, long v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode ccurl_easy_setopt_string(CURL *h, CURLoption o, const char *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode ccurl_easy_setopt_pointer(CURL *h, CURLoption o, void *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode ccurl_easy_setopt_slist(CURL *h, CURLoption o, struct curl_slist *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode ccurl_easy_setopt_off(CURL *h, CURLoption o, curl_off_t v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode ccurl_easy_setopt_write_function(CURL *h, size_t (*f)(char *, size_t, size_t, void *)) {
    return curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, f);
}
static inline CURLcode ccurl_easy_setopt_header_function(CURL *h, size_t (*f)(char *, size_t, size_t, void *)) {
    return curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, f);
}
static inline CURLcode ccurl_easy_setopt_opensocket_function(CURL *h, curl_socket_t (*f)(void *, curlsocktype, struct curl_sockaddr *)) {
    return curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, f);
}
static inline CURLcode ccurl_easy_setopt_closesocket_function(CURL *h, int (*f)(void *, curl_socket_t)) {
    return curl_easy_setopt(h, CURLOPT_CLOSESOCKETFUNCTION, f);
}
static inline CURLcode ccurl_easy_getinfo_long(CURL *h, CURLINFO i, long *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode ccurl_easy_getinfo_double(CURL *h, CURLINFO i, double *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode ccurl_easy_getinfo_off(CURL *h, CURLINFO i, curl_off_t *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode ccurl_easy_getinfo_socket(CURL *h, CURLINFO i, curl_socket_t *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode ccurl_easy_getinfo_pointer(CURL *h, CURLINFO i, void **v) { return curl_easy_getinfo(h, i, v); }
static inline CURLMcode ccurl_multi_setopt_long(CURLM *m, CURLMoption o, long v) { return curl_multi_setopt(m, o, v); }
static inline CURLMcode ccurl_multi_setopt_pointer(CURLM *m, CURLMoption o, void *v) { return curl_multi_setopt(m, o, v); }
static inline CURLMcode ccurl_multi_setopt_socket_function(CURLM *m, int (*f)(CURL *, curl_socket_t, int, void *, void *)) {
    return curl_multi_setopt(m, CURLMOPT_SOCKETFUNCTION, f);
}
static inline CURLMcode ccurl_multi_setopt_timer_function(CURLM *m, int (*f)(CURLM *, long, void *)) {
    return curl_multi_setopt(m, CURLMOPT_TIMERFUNCTION, f);
}
static inline curl_version_info_data *ccurl_version_info(void) { return curl_version_info(CURLVERSION_NOW); }

// epoll for libcurl's socket interface (struct epoll_event is packed on x86-64, awkward from Swift).
// Watches `fd` for what libcurl's socket callback asked (CURL_POLL_IN / OUT / INOUT / REMOVE).
static inline int ccurl_epoll_watch(int ep, curl_socket_t fd, int what) {
    if (what == CURL_POLL_REMOVE) {
        epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);  // fails harmlessly when libcurl already closed it
        return 0;
    }
    struct epoll_event event = {0};
    if (what & CURL_POLL_IN) event.events |= EPOLLIN;
    if (what & CURL_POLL_OUT) event.events |= EPOLLOUT;
    event.data.fd = fd;
    if (epoll_ctl(ep, EPOLL_CTL_MOD, fd, &event) == 0) return 0;
    if (errno == ENOENT) return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &event);
    return -1;
}
// Waits up to `timeout_ms` and writes up to `capacity` ready sockets with their CURL_CSELECT_* masks.
static inline int ccurl_epoll_wait(int ep, curl_socket_t *fds, int *masks, int capacity, int timeout_ms) {
    struct epoll_event events[16];
    if (capacity > 16) capacity = 16;
    int count = epoll_wait(ep, events, capacity, timeout_ms);
    for (int i = 0; i < count; i++) {
        fds[i] = events[i].data.fd;
        int mask = 0;
        if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLRDHUP)) mask |= CURL_CSELECT_IN;
        if (events[i].events & EPOLLOUT) mask |= CURL_CSELECT_OUT;
        if (events[i].events & EPOLLERR) mask |= CURL_CSELECT_ERR;
        masks[i] = mask;
    }
    return count;
}

// The socket libcurl asks its open-socket callback for, made as libcurl makes it itself (it then sets
// non-blocking mode and its socket options). `protocol` is a keyword in Swift, hence C.
static inline curl_socket_t ccurl_open_socket(const struct curl_sockaddr *address) {
    return socket(address->family, address->socktype, address->protocol);
}

// Corking a connection's socket (TCP_CORK): what libcurl sends waits in the kernel until pushed out with
// ccurl_push_socket or a full segment, so frames written one send at a time leave as one segment. Fails
// (harmlessly, -1) on a socket that is not TCP.
static inline int ccurl_cork_socket(curl_socket_t fd) {
    int on = 1;
    return setsockopt(fd, IPPROTO_TCP, TCP_CORK, &on, sizeof on);
}

// Sends what waits behind the cork now; the socket stays corked. Setting TCP_NODELAY forces out pending
// output even while TCP_CORK is set (tcp(7)), in one call where uncorking and corking again take two.
static inline int ccurl_push_socket(curl_socket_t fd) {
    int on = 1;
    return setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
}

// Flag macros built from expressions, re-exported as constants Swift can see.
enum {
    CCURL_VERSION_HTTP2 = CURL_VERSION_HTTP2,
    CCURL_GLOBAL_ALL = CURL_GLOBAL_ALL,
    CCURLPIPE_MULTIPLEX = CURLPIPE_MULTIPLEX,
    CCURL_SOCKET_TIMEOUT = CURL_SOCKET_TIMEOUT,
    CCURL_SOCKET_BAD = CURL_SOCKET_BAD,
};

#endif
