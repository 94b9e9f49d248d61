# Dependency rules of docs/architecture.md, checked on the link graph at
# configure time: a library that reaches a forbidden one through its link
# libraries (directly or transitively) stops the configuration, naming the
# path.
#
#   cleave_forbid_links(<target> <forbidden targets...>)

# Appends to `out` the link libraries of `target` that are targets.
function(_cleave_target_links target out)
  get_target_property(imported ${target} IMPORTED)
  if(imported)
    get_target_property(links ${target} INTERFACE_LINK_LIBRARIES)
  else()
    get_target_property(links ${target} LINK_LIBRARIES)
  endif()
  set(result)
  foreach(link IN LISTS links)
    string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" link "${link}")
    if(TARGET ${link})
      list(APPEND result ${link})
    endif()
  endforeach()
  set(${out} ${result} PARENT_SCOPE)
endfunction()

function(cleave_forbid_links target)
  if(NOT TARGET ${target})
    return()
  endif()
  # Breadth-first over the link graph, remembering how each was reached.
  set(queue ${target})
  set(seen ${target})
  set(path_${target} ${target})
  while(queue)
    list(POP_FRONT queue current)
    _cleave_target_links(${current} links)
    foreach(link IN LISTS links)
      if(link IN_LIST seen)
        continue()
      endif()
      list(APPEND seen ${link})
      set(path_${link} "${path_${current}} -> ${link}")
      if(link IN_LIST ARGN)
        message(FATAL_ERROR "Layering: ${target} must not link ${link} "
          "(docs/architecture.md, dependency rules), but it does: "
          "${path_${link}}")
      endif()
      list(APPEND queue ${link})
    endforeach()
  endwhile()
endfunction()

# Lowering does not link the passes on cleave IR, the search or its solver.
cleave_forbid_links(CleaveConversion
  CleaveTransforms CleavePlanner CleavePipelines PkgConfig::CBC)
# The IR knows nothing of the passes over it.
cleave_forbid_links(CleaveDialect
  CleaveTransforms CleavePlanner CleaveConversion CleavePipelines)
# Planning ends before lowering.
cleave_forbid_links(CleavePlanner CleaveConversion CleavePipelines)
# Costs are asked: they neither search nor run.
cleave_forbid_links(CleaveCostModel CleavePlanner CleaveRuntime)
