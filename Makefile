# Thin wrapper over scripts/: `make demo` and `make test` are the README's two commands.
.PHONY: demo test build clean
demo:
	./scripts/demo.sh
test:
	./scripts/test.sh
build:
	./scripts/build.sh
clean:
	rm -rf build build.configure.log
