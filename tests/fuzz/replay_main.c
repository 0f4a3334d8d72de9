/*
 * Replays a fuzz target's corpus without libFuzzer: every file under the
 * directories (or the files) named on the command line is fed to
 * LLVMFuzzerTestOneInput once. This is the fuzz-regress CTest.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static int
replay_file(const char *path)
{
	FILE *f;
	uint8_t *buf;
	long len;

	if ((f = fopen(path, "rb")) == NULL) {
		perror(path);
		return -1;
	}
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	fseek(f, 0, SEEK_SET);
	if (len < 0 || (buf = malloc(len ? (size_t)len : 1)) == NULL) {
		fclose(f);
		return -1;
	}
	if (len > 0 && fread(buf, 1, (size_t)len, f) != (size_t)len) {
		fclose(f);
		free(buf);
		return -1;
	}
	fclose(f);
	LLVMFuzzerTestOneInput(buf, (size_t)len);
	free(buf);
	return 0;
}

static int
replay(const char *path, int *count)
{
	struct stat st;
	struct dirent *de;
	DIR *d;
	char sub[4096];
	int rc = 0;

	if (stat(path, &st) == -1) {
		perror(path);
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		(*count)++;
		return replay_file(path);
	}
	if ((d = opendir(path)) == NULL)
		return -1;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name);
		if (replay(sub, count) == -1)
			rc = -1;
	}
	closedir(d);
	return rc;
}

int
main(int argc, char *argv[])
{
	int i, count = 0, rc = 0;

	for (i = 1; i < argc; i++)
		if (replay(argv[i], &count) == -1)
			rc = 1;
	if (count == 0) {
		fprintf(stderr, "no corpus files found\n");
		return 1;
	}
	printf("replayed %d inputs\n", count);
	return rc;
}
