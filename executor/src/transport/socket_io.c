/* socket_io.c - whole reads and writes on a socket with a deadline (see
 * socket_internal.h).  Writes never block (MSG_DONTWAIT, then poll), so a
 * peer that stops reading costs at most the deadline; reads of the
 * receiver threads block, and destroy ends them with shutdown(). */
#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "socket_internal.h"
#include "tf/util.h"

int tfx_socket_poll_ms(double deadline)
{
    double left = (deadline - tf_now_seconds()) * 1e3;
    if (left <= 0)
        return 0;
    return left > 200 ? 200 : (int)left + 1;
}

int tfx_socket_write_all(int fd, const void *buf, size_t len, double deadline)
{
    const unsigned char *p = buf;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            return -1;
        if (tf_now_seconds() >= deadline) {
            errno = ETIMEDOUT;
            return -1;
        }
        struct pollfd pfd = {fd, POLLOUT, 0};
        if (poll(&pfd, 1, tfx_socket_poll_ms(deadline)) < 0 && errno != EINTR)
            return -1;
    }
    return 0;
}

int tfx_socket_read_all(int fd, void *buf, size_t len, double deadline)
{
    unsigned char *p = buf;
    size_t got = 0;
    while (got < len) {
        if (deadline > 0) {
            struct pollfd pfd = {fd, POLLIN, 0};
            int r = poll(&pfd, 1, tfx_socket_poll_ms(deadline));
            if (r < 0 && errno != EINTR)
                return -1;
            if (r <= 0) {
                if (tf_now_seconds() >= deadline) {
                    errno = ETIMEDOUT;
                    return -1;
                }
                continue;
            }
        }
        ssize_t n = recv(fd, p + got, len - got, 0);
        if (n > 0) {
            got += (size_t)n;
        } else if (n == 0) {
            if (got == 0)
                return 1;
            errno = ECONNRESET;
            return -1;
        } else if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) {
            return -1;
        }
    }
    return 0;
}
