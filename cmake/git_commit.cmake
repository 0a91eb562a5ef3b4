# Run at every build (cmake -P): writes OUT with the git commit of SRC (with -dirty when tracked files outside data/
# differ; measured results are not code), and rewrites it only when that changes, so provenance names the commit a
# binary was really built from. SRC must be the top of its own checkout (not a folder inside another repository);
# where it is not, SRC/COMMIT (written by scripts/gpu-carry.sh beside a copy of the project without .git) gives the
# commit and whether its code was dirty; else the commit is "unknown".
execute_process(COMMAND git rev-parse --show-toplevel WORKING_DIRECTORY "${SRC}" OUTPUT_VARIABLE top
                OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE top_rc)
get_filename_component(src_real "${SRC}" REALPATH)
if(top_rc EQUAL 0 AND NOT top STREQUAL "")
  get_filename_component(top "${top}" REALPATH)
endif()
set(commit "unknown")
if(top_rc EQUAL 0 AND top STREQUAL src_real)
  execute_process(COMMAND git rev-parse --short HEAD WORKING_DIRECTORY "${SRC}" OUTPUT_VARIABLE head
                  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
  if(rc EQUAL 0 AND NOT head STREQUAL "")
    set(commit "${head}")
    execute_process(COMMAND git status --porcelain --untracked-files=no -- . ":(exclude)data" WORKING_DIRECTORY "${SRC}"
                    OUTPUT_VARIABLE dirty OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(NOT dirty STREQUAL "")
      set(commit "${commit}-dirty")
    endif()
  endif()
elseif(EXISTS "${SRC}/COMMIT")
  file(STRINGS "${SRC}/COMMIT" short REGEX "^short=")
  file(STRINGS "${SRC}/COMMIT" code_dirty REGEX "^code_dirty=")
  string(REGEX REPLACE "^short=" "" short "${short}")
  if(NOT short STREQUAL "")
    set(commit "${short}")
    if(code_dirty STREQUAL "code_dirty=true")
      set(commit "${commit}-dirty")
    endif()
  endif()
endif()
set(content "// Generated at build time by cmake/git_commit.cmake: the commit this binary was built from.\n#pragma once\n#define LINS_GIT_COMMIT \"${commit}\"\n")
set(old "")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL content)
  file(WRITE "${OUT}" "${content}")
endif()
