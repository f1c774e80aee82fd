/* Kinds of the descriptors the bridge hands out (bridge_mark_fd). */
#ifndef MLX5B_SHIM_H
#define MLX5B_SHIM_H
enum {
	BRIDGE_FD_CMD = 1,   /* /dev/infiniband/uverbs0 */
	BRIDGE_FD_EVENT = 2, /* async event, completion channel, DEVX fds */
};
void bridge_mark_fd(int fd, int kind);
#endif
