# Warnings and sanitizers for every target of the project (an interface target to link).
add_library(trn_build_options INTERFACE)
target_compile_options(trn_build_options INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion
  $<$<COMPILE_LANGUAGE:CXX>:-Wnon-virtual-dtor -Wold-style-cast>
  $<$<BOOL:${TRN_WARNINGS_AS_ERRORS}>:-Werror>)
if(TRN_SANITIZE)
  target_compile_options(trn_build_options INTERFACE
    -fsanitize=${TRN_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  target_link_options(trn_build_options INTERFACE -fsanitize=${TRN_SANITIZE})
endif()
